-- AlterTable
ALTER TABLE "FlowRequest" ADD COLUMN     "enterpriseId" TEXT;


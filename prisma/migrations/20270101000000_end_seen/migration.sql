-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "endSeenAt" TIMESTAMP(3);


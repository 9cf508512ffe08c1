-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "earlyStepAt" TIMESTAMP(3),
ADD COLUMN     "earlyTs" TEXT;

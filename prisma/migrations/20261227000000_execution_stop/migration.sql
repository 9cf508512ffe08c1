-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "stopClaimedAt" TIMESTAMP(3),
ADD COLUMN     "stoppedBy" TEXT;

